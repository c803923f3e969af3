"""Triton-interpreter compatibility shims: what lets a kernel decorated under ``TRITON_INTERPRET=1`` be compiled
for a GPU target in the same process, and run as the compiled kernel runs.

Six problems of Triton 3.6–3.9's interpreter, one shim each:

- an interpreted kernel is an ``InterpretedFunction``, which ``triton.compile`` does not take: :func:`as_jit`
  rebuilds it (and the ``@triton.jit`` helpers it calls through module globals) as a ``JITFunction``. This
  builds new objects and patches nothing;
- an interpreted device-function call leaves ``triton.language`` patched, which breaks every later compile:
  :func:`fix_interpreter_leak` wraps ``InterpretedFunction.__call__`` so the patch is undone on return. That
  *is* a patch of Triton, so it is never applied on import: the pytest plugin applies it through the session's
  patch layer on the interpreter lane (removed when the session ends); a script that interprets kernels and then
  compiles them applies it through a ``Patch.context()`` of its own;
- Triton 3.6's interpreter gives a scalar tensor the ``__index__`` ``int(handle.data)``, where the data is a
  1-element array, which NumPy 2 refuses ("only 0-dimensional arrays can be converted to Python scalars"): a
  ``for k0 in range(0, K, BK)`` over a runtime ``K`` fails. 3.9 squeezes the array first.
  :func:`fix_scalar_index` does what 3.9 does, per launch, in the scope Triton restores; the plugin applies it
  on the interpreter lane for the session as it does the leak fix;
- the interpreter swaps in its builtins on the modules a kernel's globals hold, ``triton.language`` and
  ``triton.language.core``, so a helper reaching a builtin as ``tl.core.sub(..., sanitize_overflow=False)``
  (triton_kernels' MXFP4 downcast) gets the compiler's, which raises "Did you forget to add @triton.jit ?".
  The raw interpreter runs it only after some device call leaked a patched ``tl.core`` (what the leak fix
  undoes). :func:`fix_core_builtins` patches ``tl.core``'s builtins in the same scope whenever ``tl``'s are;
- a Python ``float`` argument reaches the interpreted kernel as a Python float, where the compiled kernel gets
  an fp32 scalar (Triton types a float argument ``fp32``: ``triton.runtime.jit.mangle_type(1e-5)``, 3.6 and
  3.9). So Liger-Kernel's norms (``eps.to(tl.float32)``) fail with "'float' object has no attribute 'to'", and
  ``x_bf16 * scale`` stays bf16 where the GPU promotes to fp32. :func:`fix_float_args` passes an fp32 scalar;
- the compiler hands a ``@jit`` helper every non-tensor argument as a ``tl.constexpr``, and an attribute of a
  constexpr other than ``value``/``type`` is its value's (``CodeGenerator.get_Attribute``, 3.6 and 3.9). A
  helper that takes a ``tl.dtype`` and reads ``dtype.value`` (FlagGems' ``get_dtype_min``, used by its
  argmax) compiles, but fails on the interpreter, which passes the dtype itself. :func:`fix_dtype_value` gives
  ``tl.dtype`` a ``value`` (itself) for the duration of each interpreted launch, in the scope Triton restores.
"""

from __future__ import annotations

import inspect
import threading
import types
from typing import Any

from harness.interp.patch import Patch, installed, parameters, source_has

__all__ = ["as_jit", "fix_core_builtins", "fix_interpreter_leak", "fix_scalar_index", "fix_float_args",
           "fix_dtype_value", "SQUEEZES_SCALAR_INDEX", "LEAK_TAG", "INDEX_TAG", "CORE_TAG", "LANGUAGE_TAG",
           "FLOAT_TAG", "DTYPE_VALUE_TAG", "interpret_language", "language_patched", "jit_class",
           "interpreted_class"]


def jit_class() -> Any:
    """Triton's ``JITFunction`` (imported on use: nothing here imports triton at import time)."""
    from triton.runtime.jit import JITFunction

    return JITFunction


def interpreted_class() -> Any:
    """Triton's ``InterpretedFunction``, or ``()`` (matches nothing in ``isinstance``) if a Triton lacks it."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported triton has it
        return ()
    return InterpretedFunction


# --- the interpreter's leaked language patch -------------------------------------------------------------

#: The tags of the two fixes' records in the patch layer (:mod:`harness.interp.patch`).
LEAK_TAG = "jit.leak"
INDEX_TAG = "jit.scalar_index"
CORE_TAG = "jit.core_builtins"
FLOAT_TAG = "jit.float_args"
DTYPE_VALUE_TAG = "jit.dtype_value"


def fix_interpreter_leak(patch: Patch) -> bool:
    """Make interpreted device-function calls undo their patch of ``triton.language``, through ``patch``.

    Triton 3.6–3.9: ``InterpretedFunction.__call__`` (the interpreter calling a ``@jit`` helper, e.g.
    ``tl.sum`` or ``tl.zeros_like``) patches ``tl`` builtins for the interpreter and never restores them, so
    every later ``triton.compile`` in the process fails ("'value' object has no attribute 'dtype'"). The
    wrapper undoes a device call's patch when the launch it runs in ends, with the launch's own (Triton leaves it
    in place for the rest of the launch too, so interpretation is unchanged; see :class:`_Launch`), or on return
    for a call outside any launch. The launch's patch is wrapped (``_patch_lang``) to know which launch runs.

    ``False`` when nothing was patched: the fix is already in place (an outer session's), or this Triton's
    device call looks different (it is then left alone)."""
    try:
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    cls = itp.InterpretedFunction
    orig = cls.__call__
    if installed(cls, "__call__", LEAK_TAG) or getattr(itp, "_patch_lang", None) is None:
        return False
    if not source_has(orig, "_patch_lang(self.fn)", "self.rewrite()"):
        return False  # a Triton whose device call looks different: leave it alone

    orig_patch_lang = itp._patch_lang

    def _patch_lang(fn: Any) -> Any:
        scope = orig_patch_lang(fn)
        restore = getattr(scope, "restore", None)
        if restore is None or _LAUNCHES.device_call:
            return scope
        # a launch's patch (GridExecutor): the device calls inside it that patch are undone with it
        launch = _Launch([fn.__globals__], [])
        frames = _launches()
        frames.append(launch)

        def restore_launch() -> None:
            try:
                while launch.deferred:
                    launch.deferred.pop()()
                restore()
            finally:
                if launch in frames:
                    frames.remove(launch)

        scope.restore = restore_launch
        return scope

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        frames = _launches()
        launch = frames[-1] if frames else None
        g = self.fn.__globals__
        scope = None
        if launch is None or not any(p is g for p in launch.patched):
            _LAUNCHES.device_call = True
            try:
                scope = itp._patch_lang(self.fn)  # looked up per call: fix_core_builtins may wrap it
            finally:
                _LAUNCHES.device_call = False
            restore = getattr(scope, "restore", None)
            if launch is not None and restore is not None:
                launch.patched.append(g)
                launch.deferred.append(restore)
                scope = None
        try:
            return self.rewrite()(*args, **kwargs)
        except Exception as e:
            raise itp.InterpreterError(repr(e)) from e
        finally:
            restore = getattr(scope, "restore", None)
            if restore is not None:
                restore()

    patch.setattr(itp, "_patch_lang", _patch_lang, tag=LEAK_TAG)
    patch.setattr(cls, "__call__", __call__, tag=LEAK_TAG)
    return True


class _Launch:
    """A running launch's language patches: ``patched`` the module globals patched for (its kernel's, then
    each device call's), ``deferred`` the device calls' restores, undone (newest first) before the launch's own.

    Inside a launch a device call patches as Triton's interpreter does (and leaves it so, as Triton does, until the
    launch ends); a later call from the same module finds it patched already. Every patch the interpreter makes
    for a function (Triton's and the shims' that wrap it) depends on the function only through its globals, and
    Triton's scan patches only members still unpatched, so repeating it changes nothing: it cost a fifth of the
    interpreter's time in helper-heavy kernels (``tl.sum``, ``tl.cdiv`` and user helpers are device calls)."""

    __slots__ = ("patched", "deferred")

    def __init__(self, patched: list[dict[str, Any]], deferred: list[Any]) -> None:
        self.patched = patched
        self.deferred = deferred


class _LaunchState(threading.local):
    def __init__(self) -> None:
        self.frames: list[_Launch] = []
        self.device_call = False


_LAUNCHES = _LaunchState()


def _launches() -> list[_Launch]:
    """The running launches on this thread, innermost last."""
    return _LAUNCHES.frames


# --- tl.core's builtins reached through tl -------------------------------------------------------------------


def fix_core_builtins(patch: Patch) -> bool:
    """Make the interpreter patch ``triton.language.core``'s builtins whenever it patches ``triton.language``'s,
    in the same scope (restored with it), through ``patch`` (see the module docstring).

    ``False`` when nothing was patched: the fix is in place (an outer session's), or this Triton's patching
    looks different (it is then left alone)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    orig = getattr(itp, "_patch_lang", None)
    patch_attr = getattr(itp, "_patch_attr", None)
    builder = getattr(itp, "interpreter_builder", None)
    if orig is None or patch_attr is None or builder is None or installed(itp, "_patch_lang", CORE_TAG):
        return False
    if parameters(patch_attr) != ["obj", "name", "member", "builder", "scope"]:
        return False
    # Triton's code generator keys its compile-time functions by identity in a dict built when it is first
    # imported (tl.core.static_assert among them): imported now, it keeps the real ones, not a launch's patch.
    import triton.compiler.code_generator  # noqa: F401
    # the compile-time ones are left alone: the interpreter handles them itself (static_assert, static_print)
    names = [n for n, m in inspect.getmembers(tl.core) if tl.core.is_builtin(m) and not n.startswith("static_")]
    is_builtin = tl.core.is_builtin

    def _patch_lang(fn: Any) -> Any:
        scope = orig(fn)
        g = fn.__globals__
        if not any(v is tl.core for v in g.values()) and any(v is tl for v in g.values()):
            for n in names:
                member = getattr(tl.core, n)
                # Triton's own rule (_patch_builtin): a builtin an enclosing launch or call swapped out stays
                if is_builtin(member):
                    patch_attr(tl.core, n, member, builder, scope)
        return scope

    patch.setattr(itp, "_patch_lang", _patch_lang, tag=CORE_TAG)
    return True


# --- triton.language imported before the interpreter lane --------------------------------------------------

#: The tag of :func:`interpret_language`'s records in the patch layer.
LANGUAGE_TAG = "jit.language"


def interpret_language(patch: Patch) -> list[str]:
    """Make ``triton.language``'s own ``@jit`` functions (``tl.max``, ``tl.sum``, ``tl.zeros_like``...)
    interpreted, through ``patch``, when the modules were imported before ``TRITON_INTERPRET`` was set (a
    ``conftest.py`` that imports ``triton.language`` at the top: pytest imports it before the plugin chooses the
    lane). Triton decides ``JITFunction`` or ``InterpretedFunction`` when ``@jit`` runs, so those are compiler
    functions, and an interpreted kernel calling one fails with "Cannot call @triton.jit'd outside of the scope
    of a kernel". Each is replaced, in every ``triton.language`` module that holds it, by an
    ``InterpretedFunction`` of the same Python function, as ``TRITON_INTERPRET=1`` set before the import makes.
    The names replaced (empty when the modules were imported under the interpreter)."""
    import sys

    JIT, interp = jit_class(), interpreted_class()
    if interp == ():  # pragma: no cover - every supported triton has it
        return []
    made: dict[int, Any] = {}
    names: list[str] = []
    for mod_name, mod in sorted(sys.modules.items()):
        if not (mod_name == "triton.language" or mod_name.startswith("triton.language.")) or mod is None:
            continue
        for name, obj in list(vars(mod).items()):
            if type(obj) is not JIT:
                continue
            new = made.get(id(obj))
            if new is None:
                new = made[id(obj)] = interp(obj.fn)
                names.append(f"{mod_name}.{name}")
            patch.setattr(mod, name, new, tag=LANGUAGE_TAG)
    return names


# --- Triton 3.6's scalar __index__ under NumPy 2 -------------------------------------------------------------

#: set on the wrapped ``_patch_lang_tensor``: a kernel package that must not import the harness may ask
#: ``getattr(triton.runtime.interpreter._patch_lang_tensor, SQUEEZES_SCALAR_INDEX, False)``
SQUEEZES_SCALAR_INDEX = "squeezes_scalar_index"


def _squeezed_index(self: Any) -> int:
    return int(self.handle.data.squeeze())


def fix_scalar_index(patch: Patch) -> bool:
    """Make the interpreter's scalar tensors usable as Python ints under NumPy 2 (Triton 3.6; see the module
    docstring), through ``patch``: ``_patch_lang_tensor``, which sets the tensor methods of each launch in a scope
    Triton restores afterwards, is wrapped so that scope also gets the squeezing ``__index__``.

    ``False`` when nothing was patched: the Triton squeezes already (3.9), the fix is in place (an outer
    session's), or the patch looks different (left alone)."""
    try:
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    orig = getattr(itp, "_patch_lang_tensor", None)
    if orig is None or getattr(orig, SQUEEZES_SCALAR_INDEX, False):
        return False
    if not source_has(orig, '"__index__", lambda self: int(self.handle.data))'):
        return False

    def _patch_lang_tensor(tensor: Any, scope: Any) -> None:
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", _squeezed_index)

    setattr(_patch_lang_tensor, SQUEEZES_SCALAR_INDEX, True)
    patch.setattr(itp, "_patch_lang_tensor", _patch_lang_tensor, tag=INDEX_TAG)
    return True


# --- arguments as the compiled kernel receives them ---------------------------------------------------------

def fix_float_args(patch: Patch) -> bool:
    """Pass a Python ``float`` kernel argument to the interpreted kernel as an fp32 scalar tensor, as the
    compiled kernel receives it (see the module docstring), through ``patch``: ``_implicit_cvt``, which turns a
    launch's arguments into interpreter values, is wrapped. A float beyond fp32's range becomes ±inf, as the
    launcher's 32-bit packing makes it.

    ``False`` when nothing was patched: the fix is in place (an outer session's), or this Triton converts
    arguments differently (left alone)."""
    try:
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    orig = getattr(itp, "_implicit_cvt", None)
    handle_cls = getattr(itp, "TensorHandle", None)
    if orig is None or handle_cls is None or installed(itp, "_implicit_cvt", FLOAT_TAG):
        return False
    import numpy as np
    import triton.language as tl

    def _implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            with np.errstate(over="ignore"):
                data = np.array([arg], dtype=np.float32)
            return tl.tensor(handle_cls(data, tl.float32), tl.float32)
        return orig(arg)

    patch.setattr(itp, "_implicit_cvt", _implicit_cvt, tag=FLOAT_TAG)
    return True


def _dtype_itself(self: Any) -> Any:
    return self


def fix_dtype_value(patch: Patch) -> bool:
    """Give ``tl.dtype`` a ``value`` property (the dtype itself) inside each interpreted launch and device call,
    as a helper's constexpr-wrapped dtype argument has in the compiled kernel (see the module docstring), through
    ``patch``: ``_patch_lang``, whose scope Triton restores after the launch, is wrapped to set it there.
    Outside a launch, and in compiled kernels, ``tl.dtype`` is untouched.

    ``False`` when nothing was patched: ``tl.dtype`` already has a ``value``, the fix is in place (an outer
    session's), or this Triton's per-launch patching looks different (left alone)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    orig = getattr(itp, "_patch_lang", None)
    dtype_cls = getattr(tl.core, "dtype", None)
    if orig is None or dtype_cls is None or hasattr(dtype_cls, "value"):
        return False
    if installed(itp, "_patch_lang", DTYPE_VALUE_TAG):
        return False
    prop = property(_dtype_itself, doc="the dtype itself: what a helper's constexpr dtype argument gives")

    def _patch_lang(fn: Any) -> Any:
        scope = orig(fn)
        if getattr(dtype_cls, "value", None) is not prop and callable(getattr(scope, "set_attr", None)):
            scope.set_attr(dtype_cls, "value", prop)
        return scope

    patch.setattr(itp, "_patch_lang", _patch_lang, tag=DTYPE_VALUE_TAG)
    return True


def language_patched() -> bool:
    """Whether ``triton.language`` still holds the interpreter's builtins (a leak from before the fix)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    code = getattr(tl.load, "__code__", None)
    return code is not None and code.co_filename == itp.__file__


# --- InterpretedFunction -> JITFunction -------------------------------------------------------------------

_CONVERT_LOCK = threading.RLock()
_CONVERTED: dict[int, tuple[Any, Any]] = {}  # id(python function) -> (function, JITFunction)
_GLOBALS: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}  # id(module globals) -> (original, rebuilt)


def as_jit(fn: Any) -> Any:
    """A ``JITFunction`` for ``fn``. An ``InterpretedFunction`` (``TRITON_INTERPRET=1``) is rebuilt from its
    Python function, and so are the ``@triton.jit`` helpers it calls through module globals: the code
    generator rejects interpreted callees ("Unsupported function referenced"). Helpers reached any other way
    (a closure, ``module.helper``) are not rebuilt."""
    JIT = jit_class()
    if isinstance(fn, JIT):
        return fn
    if isinstance(fn, interpreted_class()):
        with _CONVERT_LOCK:
            return _jit_for(fn)
    raise TypeError(
        f"fn must be a @triton.jit kernel (JITFunction or InterpretedFunction), got {type(fn).__name__}"
    )


def _jit_for(interp: Any) -> Any:
    pyfn = interp.fn
    hit = _CONVERTED.get(id(pyfn))
    if hit is not None:
        return hit[1]
    g = pyfn.__globals__
    new_fn = pyfn
    if any(
        isinstance(v, interpreted_class()) or (isinstance(v, types.ModuleType) and _proxy_module(v) is not v)
        for v in g.values()
    ):
        g2 = _rebuilt_globals(g)
        hit = _CONVERTED.get(id(pyfn))  # converting the module may have reached this very function
        if hit is not None:
            return hit[1]
        new_fn = types.FunctionType(pyfn.__code__, g2, pyfn.__name__, pyfn.__defaults__, pyfn.__closure__)
        new_fn.__kwdefaults__ = pyfn.__kwdefaults__
        new_fn.__annotations__ = pyfn.__annotations__  # tl.constexpr lives here
        new_fn.__dict__.update(pyfn.__dict__)
        new_fn.__qualname__, new_fn.__module__, new_fn.__doc__ = (
            pyfn.__qualname__,
            pyfn.__module__,
            pyfn.__doc__,
        )
    from harness.interp.exec_source import with_file

    new_fn = with_file(new_fn)  # a kernel built by exec: its text, kept at its definition, as a file
    JIT = jit_class()
    kwargs = getattr(interp, "kwargs", None) or {}
    try:
        jit = JIT(new_fn, **kwargs)
    except TypeError:  # a jit option this triton's JITFunction does not take
        jit = JIT(new_fn)
    _CONVERTED[id(pyfn)] = (pyfn, jit)
    return jit


def _rebuilt_globals(g: dict[str, Any]) -> dict[str, Any]:
    """A copy of a module's globals with every interpreted kernel replaced by its JITFunction, and every
    module that holds interpreted kernels (``tl``: ``tl.sum``, ``tl.zeros_like`` are ``@jit`` functions of
    triton.language.standard) replaced by a proxy that holds JITFunctions. Registered before filling, so
    mutually referring helpers terminate."""
    hit = _GLOBALS.get(id(g))
    if hit is not None:
        return hit[1]
    g2 = dict(g)
    _GLOBALS[id(g)] = (g, g2)
    for k, v in g.items():
        if isinstance(v, interpreted_class()):
            g2[k] = _jit_for(v)
        elif isinstance(v, types.ModuleType):
            g2[k] = _proxy_module(v)
    return g2


_MODULES: dict[int, tuple[types.ModuleType, types.ModuleType]] = {}


def _proxy_module(m: types.ModuleType) -> types.ModuleType:
    """``m`` itself when it holds no interpreted kernels (directly or in its triton.language submodules),
    else a module object with the same attributes but JITFunctions in their place."""
    hit = _MODULES.get(id(m))
    if hit is not None:
        return hit[1]
    Interp = interpreted_class()
    attrs = vars(m)
    name = getattr(m, "__name__", "")
    deep = name.startswith("triton.language")  # recurse only through Triton's own language package
    subs = {
        k: v
        for k, v in attrs.items()
        if deep and isinstance(v, types.ModuleType) and getattr(v, "__name__", "").startswith(name + ".")
    }
    interp = {k: v for k, v in attrs.items() if isinstance(v, Interp)}
    if not interp and not subs:
        _MODULES[id(m)] = (m, m)
        return m
    proxy = types.ModuleType(name, getattr(m, "__doc__", None))
    proxy.__dict__.update(attrs)
    _MODULES[id(m)] = (m, proxy)
    for k, v in interp.items():
        setattr(proxy, k, _jit_for(v))
    for k, v in subs.items():
        setattr(proxy, k, _proxy_module(v))
    if not interp and all(getattr(proxy, k) is v for k, v in subs.items()):
        _MODULES[id(m)] = (m, m)
        return m
    return proxy
