"""What a job is: the one table of machines and images, the frozen JobSpec, reading flags and YAML into it, and the pure functions that turn it into request bodies and config files."""
