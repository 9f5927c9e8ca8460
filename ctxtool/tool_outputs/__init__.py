"""truncate, restore and trim over transcript files (the Go agent, the tool-output cache spec and adk-code).

Every changed message keeps what is needed to undo the change in the ref cache:

* each cut output's full text is a ref (what ``refs show``/``grep`` read); the message
  carries the tool-output cache spec's ``output_ref`` (id, byte_size, line_count) in its metadata, and
  ``output_refs`` (one per changed block) in its extra metadata;
* the message's original source lines and metadata are stashed as one more ref,
  named by ``source_ref``, so ``restore`` puts back exactly what was read.

Modules: ``truncate`` (truncate and trim of one transcript), ``stash`` (the stash format),
``restore``, ``files`` (the file operations, run by :mod:`ctxtool.run.runner`), ``refs`` (what
``refs gc`` keeps), ``common`` (the report and shared helpers).

>>> import ctxtool                                                  # doctest: +SKIP
>>> rep = ctxtool.truncate_file("session.jsonl", "short.jsonl")    # doctest: +SKIP
>>> rep.bytes_saved, rep.tokens_saved                              # doctest: +SKIP
"""
