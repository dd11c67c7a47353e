"""The package is typed (PEP 561: gpuctl/py.typed is installed, test_pip_install.py checks it),
so what a type checker reads must be there: every public function and method annotates its
parameters and its result, and every attribute of the objects it returns (their __slots__) has
a declared type, else a checker of the user's program would flag `device.uuid` as unknown.
Read from the source (the class bodies and signatures), not by running the package's calls."""
import inspect

import gpuctl


def public_functions():
    for name in gpuctl.__all__:
        obj = getattr(gpuctl, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if inspect.isfunction(member) and (not attr.startswith("_") or
                                                   attr in ("__init__", "__enter__")):
                    yield "%s.%s" % (name, attr), member
                elif isinstance(member, property):
                    yield "%s.%s" % (name, attr), member.fget


def test_every_public_call_is_annotated():
    missing = []
    for name, fn in public_functions():
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.name != "self" and p.annotation is inspect.Parameter.empty and \
                    p.kind is not inspect.Parameter.VAR_KEYWORD:
                missing.append("%s(%s)" % (name, p.name))
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(name + " -> ?")
    assert missing == []


def test_every_attribute_of_a_returned_object_has_a_type():
    missing = []
    for name in ("Device", "MigDevice", "Process", "Link", "Finding", "GpuHealth"):
        cls = getattr(gpuctl, name)
        declared = {}
        for base in reversed(cls.__mro__):
            declared.update(vars(base).get("__annotations__", {}))
        missing += ["%s.%s" % (name, s) for s in cls.__slots__ if s not in declared]
    assert missing == []
