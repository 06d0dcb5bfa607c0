"""The model is the package `transforms.model`: the records, load/save, diff, the kinds and the
schema. The modules folded into it (`transforms.dump`, `diff`, `kinds`, `files`) and
`transforms.record`, the model's first home, still import, warning with the new home;
`transforms.record` itself is the record() function."""
from __future__ import annotations

import subprocess
import sys

import pytest

import transforms
from transforms import model


def test_old_imports_still_work_and_say_where_the_name_went():
    with pytest.warns(DeprecationWarning, match=r"transforms\.record\.Session is now "
                                               r"transforms\.model\.Session"):
        from transforms.record import Session
    assert Session is model.Session
    with pytest.warns(DeprecationWarning, match=r"transforms\.dump\.load is now "
                                               r"transforms\.model\.load"):
        from transforms.dump import load
    assert load is model.load is transforms.load
    with pytest.warns(DeprecationWarning, match=r"transforms\.diff\.diff_stages"):
        from transforms.diff import diff_stages
    assert diff_stages is model.diff_stages
    with pytest.warns(DeprecationWarning, match=r"transforms\.kinds\.kind_of"):
        assert transforms.kinds.kind_of is model.kind_of  # type: ignore[attr-defined]


def test_a_name_the_old_module_never_had_is_an_error_naming_the_new_home():
    old = sys.modules["transforms.dump"]
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
    assert done.stdout.split() == ["True", "transforms._recording._record",
                                   "transforms.model._session"]


def test_the_records_module_holds_no_file_reading():
    """Save and load are _load's (and _layout's): the records modules define records only."""
    from transforms.model import _device_records, _load, _records, _session, _tree_records
    for module in (_records, _tree_records, _device_records, _session):
        assert not hasattr(module, "load") and not hasattr(module, "loads")
        assert not hasattr(module, "SessionLoadError")
    assert _load.Session is _session.Session
