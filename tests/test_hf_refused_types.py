"""Text model_types transformers ships that import-hf refuses: the error names what the spec
language lacks, and each is a model_type transformers does implement (so the reason, not an
unknown name, is what the user reads)."""

from __future__ import annotations

import pytest

from archspec.errors import SpecError
from archspec.hf.families import FAMILIES
from archspec.hf.import_config import import_config
from archspec.hf.unsupported import MISSING as REFUSED

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("model_type", list(REFUSED))
def test_refused_model_type_says_why(model_type: str) -> None:
    assert model_type not in FAMILIES
    transformers.AutoConfig.for_model(model_type)  # a model_type transformers implements
    with pytest.raises(SpecError) as err:
        import_config({"model_type": model_type})
    assert err.value.path == "model_type"
    assert REFUSED[model_type] in err.value.message


def test_an_unknown_model_type_is_refused_as_unknown() -> None:
    with pytest.raises(SpecError) as err:
        import_config({"model_type": "no_such_model"})
    assert err.value.message == "model_type 'no_such_model' is not supported by import-hf"
