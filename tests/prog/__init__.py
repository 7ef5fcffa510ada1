# SPDX-License-Identifier: BSD-2-Clause
"""tests/prog: the differential tier (a package, so its conftest imports by a unique name)."""
