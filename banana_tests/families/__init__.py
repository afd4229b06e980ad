"""Test families: each one package holding its test module, its options and settings, its case key
and verdict and its report section (or, for one without case records, its pytest plugin); the rest
of the suite knows them only through `family` and `family_list`."""
