"""How many threads a batch call that names none may use, decided as `tokenizers` decides it.

`TOKENIZERS_PARALLELISM=false` (or off/no/0) turns parallel batches off; `RAYON_NUM_THREADS`,
which sizes `tokenizers`' pool, sizes ours too (`CRAYON_NUM_THREADS` wins when both are set);
otherwise every core. Read on each call, so a change of the environment takes effect at once.
"""

from __future__ import annotations

import os

_OFF = ("0", "false", "off", "no", "n", "f")


def default_threads() -> int:
    """The thread count for a batch call: 0 means every core."""
    if os.environ.get("TOKENIZERS_PARALLELISM", "").strip().lower() in _OFF:
        return 1
    for name in ("CRAYON_NUM_THREADS", "RAYON_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 0
