"""Jobs: what a training job is (props, workload, pod), the TrainingJob construct, and NCCL tests."""
