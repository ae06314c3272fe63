"""Rules: the registry of every check, and the checks shared by every job."""
