"""``make test`` spreads the suite over two pytest-xdist workers with ``--dist loadgroup``, and
the groups of ``SERIAL_GROUPS`` (tests/conftest.py) keep the federations, and the Ray tests,
each on one worker in turn. xdist marks a grouped test by its node id (``...@federation``); on
pytest 9.2 that stopped working without a word (pytest-xdist issue 1386), and every group ran
spread over both workers. This notices."""

import pytest


def test_every_grouped_test_reaches_the_scheduler_in_its_group(request):
    if not getattr(request.config.option, "loadgroup", False):  # set on the workers
        pytest.skip("not run by pytest-xdist with --dist loadgroup (make test does)")
    grouped = {item.nodeid: item.get_closest_marker("xdist_group").args[0]
               for item in request.session.items if item.get_closest_marker("xdist_group")}
    if not grouped:
        pytest.skip("no test of a serial group is selected")
    assert {nodeid: group for nodeid, group in grouped.items()
            if not nodeid.endswith(f"@{group}")} == {}
