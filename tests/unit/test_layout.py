"""The source roots never shadow the standard library's ``operator`` module."""

import importlib.util
import pathlib
import sysconfig

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_operator_module_is_the_standard_librarys() -> None:
    spec = importlib.util.find_spec("operator")
    assert spec is not None and spec.origin is not None
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert pathlib.Path(spec.origin).resolve().parent == stdlib


def test_source_roots_are_not_packages() -> None:
    assert not (ROOT / "operator" / "__init__.py").exists()
    assert not (ROOT / "worker" / "__init__.py").exists()


def test_no_test_folder_is_named_operator() -> None:
    assert not [p for p in (ROOT / "tests").rglob("operator") if p.is_dir()]


def test_both_import_packages_are_importable() -> None:
    import ferryman_operator
    import ferryman_worker

    assert ferryman_worker.__version__ == ferryman_operator.__version__
