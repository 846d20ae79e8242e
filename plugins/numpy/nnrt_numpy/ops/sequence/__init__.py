"""Operator kernels: sequence.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import concat_from_sequence  # noqa: F401
from . import optional  # noqa: F401
from . import optional_get_element  # noqa: F401
from . import optional_has_element  # noqa: F401
from . import sequence_at  # noqa: F401
from . import sequence_construct  # noqa: F401
from . import sequence_empty  # noqa: F401
from . import sequence_erase  # noqa: F401
from . import sequence_insert  # noqa: F401
from . import sequence_length  # noqa: F401
from . import split_to_sequence  # noqa: F401
