"""Root conftest: this repo's own test wiring. The harness plugin itself arrives via its pytest11 entry point.

``pytester`` drives the plugin's self-tests in throwaway directories.
"""

pytest_plugins = ["pytester"]
