"""Carrying out a Plan in a target environment: which environment, the transaction, pip."""
