"""Tests of the systemd units and their installation."""
