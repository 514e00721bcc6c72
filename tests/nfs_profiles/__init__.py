"""Tests of the share profiles and the doctor."""
