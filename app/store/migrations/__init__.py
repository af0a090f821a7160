"""The schema's migrations (Alembic), shipped inside the package so that an installed
Ebbtide migrates its database wherever it runs. `app/store/migrate.py` runs them."""
