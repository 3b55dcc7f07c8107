"""The link matrix family: read linktest results, build rank/node matrices, name bad nodes and links.

Data flows one way: ``resultsfile`` (binary file -> LinkRun) -> ``analysis`` (LinkRun ->
LinkAnalysis: matrices, pair kinds, attribution) -> ``figures`` / ``output`` (files) and
``series`` (result records for history and the gate).
"""
