"""Operator kernels: misc.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import bernoulli  # noqa: F401
from . import multinomial  # noqa: F401
from . import random_normal  # noqa: F401
from . import random_uniform  # noqa: F401
from . import regex_full_match  # noqa: F401
from . import string_concat  # noqa: F401
from . import string_normalizer  # noqa: F401
from . import string_split  # noqa: F401
from . import tfidf_vectorizer  # noqa: F401
