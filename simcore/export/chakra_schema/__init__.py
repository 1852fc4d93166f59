"""MLCommons Chakra's execution-trace schema, vendored: ``et_def.proto`` and its Python module.

``et_def.proto`` is Chakra's ``schema/protobuf/et_def.proto`` as its header says (source, commit,
MIT license). ``et_def_pb2.py`` is generated from it, never edited by hand; from the repository
root, with ``grpcio-tools`` installed::

    python -m grpc_tools.protoc -I simcore/export/chakra_schema \\
        --python_out=simcore/export/chakra_schema et_def.proto

The generated module checks at import that the installed ``protobuf`` runtime is at least the
version of the ``protoc`` that generated it (its header says which); the ``chakra`` extra pins
that. ``tests/test_chakra_export.py`` regenerates it into a temporary folder and compares.
Import it through :func:`simcore.export.chakra.schema`, which turns a missing or too old
``protobuf`` into one clear line.
"""
