"""Output: rendering the fleet into dist/, and validating manifests strictly against the shipped schemas."""
