"""truncate, restore and trim over transcript files (the Go agent, the tool-output cache spec,
adk-code). Every change can be undone from the ref cache: each cut output's full text is a ref
(named by ``output_ref`` in the message's metadata, ``output_refs`` per block), and the message's
original source lines and metadata are stashed as one more ref (``source_ref``), so ``restore``
puts back exactly what was read. Modules: ``truncate``, ``stash``, ``restore``, ``files``,
``refs``, ``common``."""
