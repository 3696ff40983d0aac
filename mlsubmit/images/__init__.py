"""What a job runs on: the one home for images.

- `catalog`: the table of images (URI, framework and version, Python, accelerator kind, lifecycle, what each carries
  and what a replacement image adds);
- `choose`: the one decision: for a pool of a job, which image and how (a prebuilt image's pythonPackageSpec, a
  custom container that installs the staged packages, the user's own container, a legacy runtime);
- `carried`: the custom container's command that installs a Python package like a prebuilt image does;
- `envs` (with `interpreters`): the environments that stand in for an image on this machine;
- `check`: a package's requirements and syntax against an image.

One direction only: this package imports nothing of mlsubmit but `errors` and `home`; every other path asks it.
Nothing heavy is imported here.
"""
