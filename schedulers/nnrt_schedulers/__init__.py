"""Placement strategies shipped with nnrt, registered through the
``nnrt.schedulers`` entry-point group like third-party ones."""
