"""Population-based training (PBT): pure rules, the controller, fitness, game lists.

`config`, `population`, `fitness`, `levels`, `storage` and `controller` import no
Launchpad/Reverb; only `node` (the controller's Launchpad node) does.
"""
