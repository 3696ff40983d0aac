"""Running a job on this machine: the replicas' service environment, isolated venvs, one process group per replica, and children that die with their parent."""
