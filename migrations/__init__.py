"""Alembic migrations of partctl's SQL store; shipped as a package so an installed partctl can
upgrade its own database (``partctl db upgrade``)."""
