"""Operator kernels: tensor.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
from . import bitcast  # noqa: F401
from . import cast  # noqa: F401
from . import center_crop_pad  # noqa: F401
from . import concat  # noqa: F401
from . import constant  # noqa: F401
from . import depth_space  # noqa: F401
from . import expand  # noqa: F401
from . import eyelike  # noqa: F401
from . import flatten  # noqa: F401
from . import gather  # noqa: F401
from . import gather_elements  # noqa: F401
from . import gather_nd  # noqa: F401
from . import identity  # noqa: F401
from . import onehot  # noqa: F401
from . import pad  # noqa: F401
from . import reshape  # noqa: F401
from . import reverse_sequence  # noqa: F401
from . import scatter  # noqa: F401
from . import select  # noqa: F401
from . import shape  # noqa: F401
from . import slice  # noqa: F401
from . import split  # noqa: F401
from . import squeeze  # noqa: F401
from . import tensor_scatter  # noqa: F401
from . import transpose  # noqa: F401
from . import unique  # noqa: F401
