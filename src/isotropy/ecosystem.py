"""Compatibility: the module that isotropy 0.1 put its sentence-transformers and scikit-learn helpers in.

Their home is now :mod:`isotropy.integrations`. This module stays because folders that
isotropy 0.1 wrote name their module classes ``isotropy.ecosystem.IsotropyPooling`` and
``isotropy.ecosystem.IsotropyTransform`` in ``modules.json``, and sentence-transformers
imports them by that name; code written against 0.1 (``from isotropy.ecosystem import
to_sentence_transformer``) keeps working too. Every name is handed out from
:mod:`isotropy.integrations` (the classes created on first access, as there); nothing is
defined here. New folders name the classes at their new home.

It is removed in isotropy 1.0 (docs/ARCHITECTURE.md): the 0.x releases load 0.1's folders as
they are; recalibrating one writes the new module paths.
"""


def __getattr__(name):
    import isotropy.integrations as integrations

    if name in integrations.__all__:
        return getattr(integrations, name)
    if name == "transform_module":
        raise AttributeError(
            "isotropy.ecosystem.transform_module was removed: use isotropy.transforms.as_transform(t).to_torch(dtype)"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
