"""The guards every input and output passes through, one concept per module:

- `text`: one sanitiser for everything printed or generated (control, bidi, invisible
  characters; rich markup);
- `limits`: the size and depth bounds that hostile files and numbers are held to;
- `reading`: bounded reads of regular files only (no FIFOs, devices, endless /proc files);
- `json_file`: strict JSON (no duplicate keys, no huge integers, bounded nesting, UTF-8);
- `writing`: the one writer for every output file (atomic, never onto an input, all or none).
"""
