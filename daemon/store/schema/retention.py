"""Tables of the retention domain."""

DDL = """
"""
