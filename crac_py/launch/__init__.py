"""Starting a program under crac: ELF preflight, device backends, the loader's command line and
exec (runner.py), and jobs (several processes under one coordinator, job.py)."""
