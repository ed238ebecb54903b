tools filesystem read-text-file path=$F/notes/todo.txt > todo.txt
tools filesystem write-file path=$F/backup/todo.txt content=@todo.txt > /dev/null
