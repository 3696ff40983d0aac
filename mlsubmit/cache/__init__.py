"""What mlsubmit keeps on this machine, and how it keeps the disk bounded.

- `entries`: how one environment is kept: built aside and renamed into place (a build that runs out of disk is one
  line and leaves nothing), held by whoever uses it (never removed under a running job), stamped with its last use.
  Standard library, mlsubmit.errors and mlsubmit.home only: the images and venvs modules build on it.
- `inventory`: everything under $MLSUBMIT_HOME and $MLSUBMIT_IMAGES, kind by kind, with size, last use and whether
  it is in use; `mlsubmit cache list|prune` and the pruning after a build (MLSUBMIT_CACHE_MAX_SIZE,
  MLSUBMIT_CACHE_MAX_AGE).
- `limits`: sizes and ages as users write them (20GB, 30d) and the two settings.
"""
