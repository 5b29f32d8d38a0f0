"""Errors that qpriv raises for bad input, and the range checks that raise them.

Every message names the offending value, the valid range and, where there is one, the fix.
The command line turns these into one line on stderr and exit code 2.
"""

from __future__ import annotations

import math
import numbers
import operator
import string
from collections.abc import Mapping


class QprivError(Exception):
    """Base class of every error qpriv raises on purpose."""


class InvalidInputError(QprivError, ValueError):
    """An argument or a data file is outside what the method accepts."""


def _bad_value(name: str, rest: str) -> InvalidInputError:
    """The error ``name`` + ``rest``: an :class:`ArgumentError` naming the argument where
    ``name`` is one (so the command line says ``--preclip-noise = -1``, Python
    ``preclip_noise = -1``), plain text for a described quantity ("hidden width")."""
    if name.isidentifier():
        return ArgumentError("{" + name + "}" + ArgumentError.literal(rest))
    return InvalidInputError(name + rest)


def require_finite(name: str, value: float) -> float:
    """Return ``value`` as float, or raise if it is not a real number (a bool or a string
    included: ``True`` and ``"1"`` were read as 1) or is NaN or infinite."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _bad_value(name, f" = {value!r} is not a number; give a real number, e.g. 1")
    value = float(value)
    if not math.isfinite(value):
        raise _bad_value(name, f" must be a finite number, got {value}")
    return value


def require_in_range(
    name: str,
    value: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = False,
    high_inclusive: bool = True,
    hint: str = "",
) -> float:
    """Return ``value`` as float if it lies in the interval, else raise a clear error.

    The interval is written in the message the way a mathematician would, e.g. ``(0, 1]``.
    """
    value = require_finite(name, value)
    ok = True
    if low is not None:
        ok &= value >= low if low_inclusive else value > low
    if high is not None:
        ok &= value <= high if high_inclusive else value < high
    if not ok:
        left = "(-inf" if low is None else ("[" if low_inclusive else "(") + f"{low:g}"
        right = "inf)" if high is None else f"{high:g}" + ("]" if high_inclusive else ")")
        message = f" = {value:g} is outside the valid range {left}, {right}"
        raise _bad_value(name, f"{message}; {hint}" if hint else message)
    return value


def require_budget(name: str, value: float, *, cap: float, above: str) -> float:
    """Return the privacy budget ``value`` if it lies in (0, ``cap``]; a value <= 0 and one
    above the cap each get their own advice (``above`` says what to do instead of a budget
    that promises nothing)."""
    value = require_in_range(name, value, low=0.0,
                             hint="a privacy budget must be > 0 (smaller is more private; 1 "
                                  "is a common choice)")
    return require_in_range(name, value, low=0.0, high=cap,
                            hint=f"above {cap:g} a budget promises nothing {above}")


def _integer(value: object, bad: InvalidInputError) -> int:
    """``value`` as int if it is an integer (bool excluded), else raise ``bad``."""
    if isinstance(value, bool):
        raise bad
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise bad from None


def require_seed(name: str, value: object) -> int:
    """Return ``value`` as int if it is a seed NumPy and torch accept: an integer in
    [0, 2**63) (bool excluded), else raise."""
    bad = _bad_value(name, f" = {value!r} is not a seed: give an integer in [0, 2**63)")
    number = _integer(value, bad)
    if not 0 <= number < 2**63:
        raise bad
    return number


def require_positive_int(name: str, value: object) -> int:
    """Return ``value`` as int if it is an integer >= 1 (bool excluded), else raise."""
    number = _integer(value, _bad_value(name, f" = {value!r} is not an integer >= 1"))
    if number < 1:
        raise _bad_value(name, f" = {number} is outside the valid range [1, inf): it must be "
                               "an integer >= 1")
    return number


class ArgumentError(InvalidInputError):
    """Arguments that do not go together, in words that name them.

    ``template`` writes every argument it names as a format field (``"{eps_total}"``). The
    message (``str(error)``) names them as a Python caller wrote them: ``eps_total``, or
    ``accounting='rigorous'`` for a field that ``values`` gives a value. :meth:`spelled` names
    them as another interface spells them, e.g. the command line's ``--eps-total`` and
    ``--accounting rigorous``, so that one rule, kept in the library, reads right in both.

    Example:

    >>> err = ArgumentError("{accounting} needs {eps_total}", values={"accounting": "rigorous"})
    >>> str(err)
    "accounting='rigorous' needs eps_total"
    >>> err.spelled({"accounting": "--accounting", "eps_total": "--eps-total"})
    '--accounting rigorous needs --eps-total'
    """

    def __init__(self, template: str, *, values: Mapping[str, object] | None = None) -> None:
        self.template = template
        self.values = dict(values or {})
        super().__init__(self.spelled({}))

    @staticmethod
    def literal(text: object) -> str:
        """``text`` (a path, a repr) for a template, read as it is: its braces doubled."""
        return str(text).replace("{", "{{").replace("}", "}}")

    def spelled(self, names: Mapping[str, str]) -> str:
        """The message with each argument called by ``names[field]`` (a field that ``names``
        lacks keeps its Python name)."""
        words = {}
        for _, field, _, _ in string.Formatter().parse(self.template):
            if not field:
                continue
            if field not in self.values:
                words[field] = names.get(field, field)
            elif field in names:
                words[field] = f"{names[field]} {self.values[field]}"
            else:
                words[field] = f"{field}={self.values[field]!r}"
        return self.template.format(**words)
