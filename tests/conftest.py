import pytest

pytest.register_assert_rewrite("animus_flows.testing")
