"""Test families: each one package holding its test module, its case key and verdict, and its
report section; the rest of the suite knows them only through `family` and `family_list`."""
