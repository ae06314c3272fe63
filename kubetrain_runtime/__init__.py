"""kubetrain's training runtime: what keeps a run's work whoever writes the loop."""
