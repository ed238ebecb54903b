"""The shell side of a shell call: the bashkit adapters, the `tools` builtin, the static checks
(before-start and `tools plan`) and saved-script runs."""
