"""A plug-in's migrations, for the migration tests: what a provider outside ferryman ships."""
