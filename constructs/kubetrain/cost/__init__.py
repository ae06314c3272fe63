"""What a run costs: EC2 prices (prices.json, generated), the estimate of a job's run from its manifests in
dist/, `kubetrain cost` and the priced `kubetrain diff`."""
