"""Every scope Python has, each asking FlashInfer's CUDA version (tests/releases/test_cuda_scopes.py).

Each case_* function returns what its call site was answered; the site is named in CASES of the test.
torch's CUDA is 12.8 and the toolkit's 13.0 there, so every answer says which of the two it was.
"""

import functools

from flashinfer.jit import cpp_ext
from flashinfer.jit.cpp_ext import get_cuda_version, is_cuda_version_at_least
from flashinfer.jit.cpp_ext import is_cuda_version_at_least as _at_least

_lookup = get_cuda_version
_at_least_13 = functools.partial(is_cuda_version_at_least, "13.0")
_by_getattr = getattr(cpp_ext, "get_cuda_version")  # noqa: B009 - the form under test

AT_IMPORT = get_cuda_version()


class AtClassBody:
    VALUE = get_cuda_version()
    LISTED = [get_cuda_version() for _ in range(1)][0]


def case_module_level():
    return AT_IMPORT


def case_class_body():
    return AtClassBody.VALUE


def case_class_body_comprehension():
    return AtClassBody.LISTED


def case_plain():
    return get_cuda_version()


def case_lambda():
    ask = lambda: get_cuda_version()  # noqa: E731 - the scope under test
    return ask()


def case_lambda_called_elsewhere():
    return _call(lambda: get_cuda_version())


def _call(fn):
    return fn()


def case_listcomp():
    return [get_cuda_version() for _ in range(1)][0]


def case_setcomp():
    return {get_cuda_version() for _ in range(1)}.pop()


def case_dictcomp():
    return {0: get_cuda_version() for _ in range(1)}[0]  # noqa: B035


def case_genexpr():
    return next(get_cuda_version() for _ in range(1))


def case_genexpr_consumed_elsewhere():
    return _first(get_cuda_version() for _ in range(1))


def _first(items):
    return next(iter(items))


def case_lambda_in_comprehension():
    return [(lambda: get_cuda_version())() for _ in range(1)][0]


def case_default_argument():
    def inner(version=get_cuda_version()):  # noqa: B008 - the scope under test
        return version

    return inner()


def case_nested():
    def inner():
        return get_cuda_version()

    return inner()


def case_closure():
    return _make()()


def _make():
    def made():
        return get_cuda_version()

    return made


class Runner:
    def method(self):
        return get_cuda_version()

    @staticmethod
    def static():
        return get_cuda_version()

    @classmethod
    def klass(cls):
        return get_cuda_version()

    @property
    def prop(self):
        return get_cuda_version()

    @functools.cache  # noqa: B019 - a cached method, as FlashInfer has them
    def cached(self):
        return get_cuda_version()

    class Inner:
        def method(self):
            return get_cuda_version()


def case_method():
    return Runner().method()


def case_staticmethod():
    return Runner.static()


def case_classmethod():
    return Runner.klass()


def case_property():
    return Runner().prop


def case_cached_method():
    return Runner().cached()


def case_nested_class():
    return Runner.Inner().method()


def case_class_in_function():
    class Local:
        def method(self):
            return get_cuda_version()

    return Local().method()


def case_generator():
    def versions():
        yield get_cuda_version()

    return next(versions())


def case_coroutine():
    async def ask():
        return get_cuda_version()

    try:
        ask().send(None)
    except StopIteration as done:
        return done.value


def case_alias_import():
    return _at_least("13.0")


def case_alias_assignment():
    return _lookup()


def case_alias_local():
    ask = cpp_ext.get_cuda_version
    return ask()


def case_attribute():
    return cpp_ext.get_cuda_version()


def case_getattr():
    return getattr(cpp_ext, "get_cuda_version")()  # noqa: B009 - the form under test


def case_getattr_at_import():
    return _by_getattr()


def case_partial():
    return _at_least_13()


def case_partial_inline():
    return functools.partial(is_cuda_version_at_least, "13.0")()


def _forwarder(version):
    return is_cuda_version_at_least(version)


def case_forwarder():
    return _forwarder("13.0")


def case_forwarder_of_a_value():
    return _forward_value(get_cuda_version)


def _forward_value(lookup):
    return lookup()


def case_same_text_again():
    get_cuda_version()
    return get_cuda_version()  # the second call of this text in the function: a call of its own


def case_new_text_in_a_listed_function():
    get_cuda_version()
    return is_cuda_version_at_least("13.0")  # another call beside a listed one
