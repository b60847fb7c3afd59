"""The sidebar: conversations, newest first, with search, new, rename and delete (the buttons, and a
right-click's menu)."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QHBoxLayout, QInputDialog, QLabel, QLineEdit, QListWidget, QListWidgetItem,
                               QMenu, QMessageBox, QPushButton, QSizePolicy, QVBoxLayout, QWidget)

from desktop_app.chat.history import ConversationInfo


class ConversationList(QWidget):
    selected = Signal(int)
    activated = Signal()             # Return (or a double click) on a conversation: on to its message box
    newRequested = Signal()
    renamed = Signal(int, str)
    deleteRequested = Signal(int)
    searchChanged = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._writing: int | None = None          # the conversation a reply is being written in (set_writing)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 6, 4, 6)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setToolTip("Search conversations (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.searchChanged)
        layout.addWidget(self.search)
        self.no_match = QLabel("No conversation matches.")
        self.no_match.setEnabled(False)                      # (greyed: a note, not an item)
        self.no_match.hide()
        layout.addWidget(self.no_match)
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)    # long titles end in "…"
        self.list.setTextElideMode(Qt.ElideRight)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemClicked.connect(lambda item: self._current_changed(item, None))   # (the current one, too)
        self.list.itemActivated.connect(lambda _item: self.activated.emit())
        self.search.installEventFilter(self)     # (Down goes from the search to the list)
        self.list.setContextMenuPolicy(Qt.CustomContextMenu)   # (a right-click offered nothing: a new user's
        self.list.customContextMenuRequested.connect(self._menu_at)   # try; the window adds its Rename and
        self.delete_action = QAction("Delete conversation…", self)   # Export to list.actions())
        self.delete_action.triggered.connect(lambda: self.delete_current())
        self.menu = QMenu(self.list)                    # (one, filled as it is shown)
        layout.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.setSpacing(4)
        self.new_button = QPushButton("New")
        self.new_button.setToolTip("New conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.newRequested)
        rename = self.rename_button = QPushButton("Rename")
        rename.setToolTip("Rename (F2)")
        rename.clicked.connect(self.rename_current)
        delete = self.delete_button = QPushButton("Delete")
        delete.clicked.connect(self.delete_current)
        for b in (rename, delete):            # (only with a conversation chosen: after a Delete they stayed
            b.setEnabled(False)               # on and did nothing, a new user's try)
        for b in (self.new_button, rename, delete):
            # as wide as the text (the style's 80 px minimum would make the sidebar 260 px wide)
            b.setMinimumWidth(b.fontMetrics().horizontalAdvance(b.text()) + 14)
            b.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
            row.addWidget(b, 1)
        layout.addLayout(row)

    def set_conversations(self, conversations: list[ConversationInfo], current: int | None) -> None:
        self.no_match.setVisible(not conversations and bool(self.search.text().strip()))
        self.list.blockSignals(True)
        self.list.clear()
        for c in conversations:
            item = QListWidgetItem(c.title)
            item.setData(Qt.UserRole, c.id)
            item.setToolTip(c.title)
            self.list.addItem(item)
            if c.id == current:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        self._enable_buttons()
        self.set_writing(self._writing)

    def set_writing(self, conversation_id: int | None) -> None:
        """Mark the conversation a reply is being written in (None: none): its title in italics, and its
        tooltip saying so (nothing in the list said which, a new user's try)."""
        self._writing = conversation_id
        for i in range(self.list.count()):
            item = self.list.item(i)
            title = item.toolTip().split("\n")[0]
            writing = item.data(Qt.UserRole) == conversation_id
            font = item.font()
            font.setItalic(writing)
            item.setFont(font)
            item.setToolTip(f"{title}\n(a reply is being written here)" if writing else title)

    def eventFilter(self, watched, event) -> bool:
        """Down in the search box goes on to the list, at its first conversation (it did nothing: a new
        user's try)."""
        if watched is self.search and event.type() == QEvent.KeyPress and event.key() == Qt.Key_Down \
                and self.list.count():
            self.list.setFocus()
            if self.list.currentRow() < 0:
                self.list.setCurrentRow(0)
            return True
        return super().eventFilter(watched, event)

    def step(self, by: int) -> None:
        """The conversation `by` rows below the one chosen (above, for a negative `by`) is chosen, as a
        click chooses it (Ctrl+PgDown, Ctrl+PgUp); none past either end."""
        row = min(max(self.list.currentRow() + by, 0), self.list.count() - 1)
        if row >= 0 and row != self.list.currentRow():
            self.list.setCurrentRow(row)

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else int(item.data(Qt.UserRole))

    def _current_changed(self, item, _previous) -> None:
        self._enable_buttons()
        if item is not None:
            self.selected.emit(int(item.data(Qt.UserRole)))

    def _enable_buttons(self) -> None:
        for b in (self.rename_button, self.delete_button, self.delete_action):
            b.setEnabled(self.list.currentItem() is not None)

    def _menu_at(self, pos: QPoint) -> None:
        """Right-click on a conversation: it is chosen (as a click chooses it), and its menu shown."""
        item = self.list.itemAt(pos)
        if item is not None:
            self.list.setCurrentItem(item)
            self.context_menu().popup(self.list.viewport().mapToGlobal(pos))

    def context_menu(self) -> QMenu:
        """What can be done with the conversation chosen: the list's actions (the window's Rename and
        Export, then Delete)."""
        self.menu.clear()
        self.menu.addActions(self.list.actions())
        return self.menu

    def rename_current(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        dialog = rename_dialog(self, item.text())
        title = dialog.textValue().strip() if dialog.exec() else ""
        dialog.deleteLater()
        if title:
            self.renamed.emit(int(item.data(Qt.UserRole)), title)

    def delete_current(self) -> None:
        """Ask to delete the selected conversation (`deleteRequested`: the window checks, then confirms)."""
        item = self.list.currentItem()
        if item is not None:
            self.deleteRequested.emit(int(item.data(Qt.UserRole)))

    def confirm_delete(self, conversation_id: int) -> bool:
        title = next((self.list.item(i).text() for i in range(self.list.count())
                      if int(self.list.item(i).data(Qt.UserRole)) == conversation_id), "this conversation")
        return QMessageBox.question(self, "Delete conversation",
                                    f"Delete “{title}” and all its messages?") == QMessageBox.Yes


RENAME_WIDTH = (360, 640)    # the rename dialog's width in pixels: at least, and at most


def rename_dialog(parent: QWidget, title: str) -> QInputDialog:
    """The rename dialog, its field wide enough for the title as it stands (up to RENAME_WIDTH's
    most): at Qt's own width a title made from a first message showed its last 25 characters, its
    start scrolled out of view (a new user's try)."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle("Rename conversation")
    dialog.setLabelText("Title:")
    dialog.setTextValue(title)
    wanted = dialog.fontMetrics().horizontalAdvance(title) + 60
    dialog.resize(min(max(wanted, RENAME_WIDTH[0]), RENAME_WIDTH[1]), dialog.sizeHint().height())
    return dialog
