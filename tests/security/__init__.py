"""Attacks on envlock from untrusted input (issue 22): each test failed on the code before its fix.

docs/security.md holds the threat model and the table of attack class -> verdict -> test.
"""
