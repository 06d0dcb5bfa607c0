"""The model is `transforms.model`, reading dumps `transforms.dump`: `transforms.record` is the
record() function, and the module of that old name only forwards old imports (issue 13)."""
from __future__ import annotations

import subprocess
import sys

import pytest

import transforms
from transforms import dump, model


def test_old_imports_from_transforms_record_still_work_and_say_where_the_name_went():
    with pytest.warns(DeprecationWarning, match=r"transforms\.record\.Session is now "
                                               r"transforms\.model\.Session"):
        from transforms.record import Session
    assert Session is model.Session
    with pytest.warns(DeprecationWarning, match=r"transforms\.dump\.load"):
        from transforms.record import load
    assert load is dump.load is transforms.load


def test_a_name_the_old_module_never_had_is_an_error_naming_the_new_homes():
    old = sys.modules["transforms.record"]
    with pytest.raises(AttributeError, match="transforms.model"):
        old.NoSuchRecord  # noqa: B018
    with pytest.raises(ImportError):
        from transforms.record import NoSuchRecord  # noqa: F401


def test_transforms_record_stays_the_function_after_the_old_module_is_imported():
    code = ("import warnings, transforms\n"
            "warnings.simplefilter('ignore')\n"
            "import transforms.record\n"
            "from transforms.record import Session\n"
            "import transforms.record as r\n"
            "with transforms.record() as s:\n"
            "    pass\n"
            "print(callable(r), r.__module__, type(s).__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["True", "transforms._recorder", "transforms.model"]


def test_the_model_module_holds_no_file_reading():
    """Save and load are transforms.dump's (and _layout's): the model defines records only."""
    assert not hasattr(model, "load") and not hasattr(model, "loads")
    assert not hasattr(model, "SessionLoadError")
    assert dump.Session is model.Session
