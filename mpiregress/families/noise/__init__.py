"""OS noise: read FWQ result files, measure each node and core, find periodic events, judge nodes.

Modules, in the order data flows: ``fwqfile`` (the binary file of checks/src/fwq),
``analysis`` (efficiency, per-core losses, spectrum), ``findings`` (sentences),
``records`` (series records for history and the gate), ``verdict`` (noisy-node
rule and ``--repeat auto``), ``rtla`` (the kernel's own view, where it runs),
``placement`` (layouts for the 24-vs-23 and SMT experiments).
"""
