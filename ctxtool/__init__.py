"""ctxtool: offline context management for LLM agent transcripts."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import CtxtoolError as CtxtoolError
from .errors import ExitCode as ExitCode
from .model import Block as Block
from .model import Compaction as Compaction
from .model import Message as Message
from .model import Metadata as Metadata
from .model import Transcript as Transcript
from .model import Usage as Usage
