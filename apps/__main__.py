from kubetrain.cli import run_synth

raise SystemExit(run_synth("apps"))
