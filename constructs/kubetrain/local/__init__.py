"""`kubetrain run-local`: committed jobs run on this machine, as their operator would run them."""
