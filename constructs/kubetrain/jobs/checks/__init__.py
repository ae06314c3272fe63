"""The compile-time rules of a training job, one module per concern, run in order by job_checks.

Every module here declares its rules beside their checks (job_rules.JobRules); job_checks runs them, section by
section, and the checks other modules make on the job (platform_checks and the rest). Nothing here imports
job_checks, which imports them all.
"""
