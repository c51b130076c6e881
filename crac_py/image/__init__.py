"""Checkpoint images on disk: finding generations and reading MANIFEST.json (generation.py),
checksums (digest.py), `crac verify` and `crac inspect` (docs/IMAGE.md)."""
